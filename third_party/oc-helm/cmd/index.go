/*
Copyright © 2022 redhat-developer

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/
package cmd

import (
	"github.com/redhat-cop/oc-helm/pkg/action"
	"github.com/redhat-cop/oc-helm/pkg/options"
	"github.com/spf13/cobra"
)

func newIndexCmd(commandLineOptions *options.CommandLineOption) *cobra.Command {

	action := action.NewIndexAction(commandLineOptions)

	// indexCmd represents the index command
	indexCmd := &cobra.Command{
		Use:   "index",
		Short: "Index of Available Charts",
		Long:  "Index of Available Charts Defined in the Cluster",
		RunE: func(cmd *cobra.Command, args []string) error {

			err := action.Setup()

			if err != nil {
				return err
			}

			return action.Run()

		},
	}

	return indexCmd

}
